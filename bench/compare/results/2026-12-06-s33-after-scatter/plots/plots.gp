set terminal pngcairo size 900,600 noenhanced
set logscale xy
set grid
set key top left
set xlabel 'size (full buffer)'
set xtics ('8 B' 8, '64 B' 64, '1 KiB' 1024, '16 KiB' 16384, '256 KiB' 262144, '4 MiB' 4194304, '64 MiB' 67108864)
set output 'tcp4_scatter_busbw.png'
set title 'scatter, 4 ranks (oversubscribed), TCP over loopback'
set ylabel 'bus bandwidth (GB/s)'
plot 'tcp4_scatter_cohort.dat' using 1:3 with linespoints title 'cohort', 'tcp4_scatter_ompi.dat' using 1:3 with linespoints title 'Open MPI'
set output 'tcp4_scatter_lat.png'
set title 'scatter, 4 ranks (oversubscribed), TCP over loopback'
set ylabel 'time per op (us)'
plot 'tcp4_scatter_cohort.dat' using 1:2 with linespoints title 'cohort', 'tcp4_scatter_ompi.dat' using 1:2 with linespoints title 'Open MPI'
set output 'tcp4osu_scatter_busbw.png'
set title 'scatter, 4 ranks (oversubscribed), TCP over loopback, OSU style'
set ylabel 'bus bandwidth (GB/s)'
plot 'tcp4osu_scatter_cohort.dat' using 1:3 with linespoints title 'cohort', 'tcp4osu_scatter_ompi.dat' using 1:3 with linespoints title 'Open MPI'
set output 'tcp4osu_scatter_lat.png'
set title 'scatter, 4 ranks (oversubscribed), TCP over loopback, OSU style'
set ylabel 'time per op (us)'
plot 'tcp4osu_scatter_cohort.dat' using 1:2 with linespoints title 'cohort', 'tcp4osu_scatter_ompi.dat' using 1:2 with linespoints title 'Open MPI'
